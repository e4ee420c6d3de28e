#!/bin/bash
set -e
cd /app/repo
echo "hello, world" > greeting.txt
git add greeting.txt
git commit -q -m "fix greeting"
git clone -q /app/repo /app/clone
