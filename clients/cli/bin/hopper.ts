#!/usr/bin/env node
import { main } from '../src/program.ts';

process.exitCode = await main(process.argv, { env: process.env, stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
