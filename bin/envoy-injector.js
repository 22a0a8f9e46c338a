#!/usr/bin/env node
// The compiled CLI (built by `npm ci`/`npm install` through the prepare script).
import { runCli } from '../dist/cli.js';

const io = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr };
process.exitCode = await runCli(process.argv.slice(2), io);
