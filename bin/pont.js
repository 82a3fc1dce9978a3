#!/usr/bin/env node
// The `pont` command. In a development checkout (tsx, a development dependency, installed) it runs the
// TypeScript sources through tsx: nothing stale, no build step. Elsewhere (the image, `npm ci --omit=dev`) it
// runs the compiled build, dist/ (`npm run build`), with source maps. `npm start` always runs the build.
const tsx = await import('tsx/esm/api').catch((err) => {
  if (err?.code === 'ERR_MODULE_NOT_FOUND') return undefined;
  throw err;
});

if (tsx) {
  tsx.register();
  const { runCli } = await import('../src/cli.ts');
  process.exitCode = await runCli(process.argv.slice(2));
} else {
  process.setSourceMapsEnabled(true);
  await import('../dist/bin.js').catch((err) => {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('dist/bin.js')) throw err;
    console.error('pont: no build in dist/ (and no tsx to run the sources): run npm run build');
    process.exit(1);
  });
}
