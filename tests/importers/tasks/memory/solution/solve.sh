#!/usr/bin/env python3
size = 1100 << 20
block = bytearray(size)
for i in range(0, size, 4096):
    block[i] = 1
assert sum(block[::4096]) == size // 4096
open("/app/held.txt", "w").write(str(len(block) >> 20) + "\n")
