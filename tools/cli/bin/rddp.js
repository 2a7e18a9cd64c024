#!/usr/bin/env -S node --initial-old-space-size=128
// V8 flags as in ../src/node-flags.ts (why: there).
import '../dist/main.js';
