// The compiled `pont` command (dist/bin.js, `npm run build`): what `npm start` and the image run.
// bin/pont.js runs it too where tsx is not installed.
import { runCli } from './cli';

process.exitCode = await runCli(process.argv.slice(2));
