"""Environment synthesis: validated task cards from real repositories and from agent
trajectories (docs/synthesis.md).

- :func:`synth_repo` (``ceiling synth repo``): procedural bugs (:data:`MODIFIERS`) injected
  into a real Python project's covered functions; kept when the project's own tests catch
  them and the card validates.
- :func:`synth_trajectories` (``ceiling synth trajectories``): a trajectory's initial
  workspace recovered by replaying its file operations backwards; tests from its end state.
- :func:`measure_difficulty` (``--policy`` on both, ``ceiling synth difficulty``): a base
  policy's pass rate per card, the measured difficulty beside the generator's estimate.
- :func:`bench_synth` (``ceiling bench synth``): both yields and speed on real projects.
"""

from ._bench import DEFAULT_PROJECTS, bench_synth
from ._difficulty import measure_difficulty
from ._modifiers import ALL_MODIFIERS as MODIFIERS
from ._repo import RepoOptions, synth_repo
from ._trajectories import TrajOptions, synth_trajectories

__all__ = ["DEFAULT_PROJECTS", "MODIFIERS", "RepoOptions", "TrajOptions", "bench_synth",
           "measure_difficulty", "synth_repo", "synth_trajectories"]
