#!/usr/bin/env node
import { main } from '../src/program.ts';

// A reader that stops early (`hopper emails list | head -3`) closes the pipe: nothing more is
// wanted, so hopper ends there, quietly and with success as head itself does, instead of dying of
// an EPIPE error and its stack.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(0);
  });
}

process.exitCode = await main(process.argv, { env: process.env, stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
