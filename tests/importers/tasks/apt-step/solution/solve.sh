#!/bin/bash
pv -q /app/input.bin > /app/copy.bin
