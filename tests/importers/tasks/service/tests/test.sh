#!/bin/bash
cd /app
nohup python3 /app/server.py > /tmp/server.log 2>&1 &
sleep 1
uvx -w pytest==8.4.1 pytest /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
