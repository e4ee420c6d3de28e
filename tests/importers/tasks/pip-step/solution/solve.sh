#!/usr/bin/env python3
import tomli_w

with open("/app/out.toml", "wb") as f:
    tomli_w.dump({"name": "ceiling", "n": 3}, f)
