#!/usr/bin/env node
// The `pont` command. Runs the TypeScript sources directly through tsx: no build step, nothing stale.
import { register } from 'tsx/esm/api';

register();
const { runCli } = await import('../src/cli.ts');
process.exitCode = await runCli(process.argv.slice(2));
