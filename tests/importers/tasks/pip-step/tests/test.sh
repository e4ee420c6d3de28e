#!/bin/bash
pip install pytest==8.4.1
pytest /tests/test_outputs.py -rA && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
