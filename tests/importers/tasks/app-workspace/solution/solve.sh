#!/bin/bash
total=0
while read -r n; do total=$((total + n)); done < data/numbers.txt
echo "$total" > /app/sum.txt
