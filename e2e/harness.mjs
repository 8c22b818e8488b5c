// What both TypeScript client suites need of the real bub-mcp binary: a
// server over streamable HTTP on a free loopback port, and the text of a
// tool result.
import { spawn } from 'node:child_process';

// textOf joins a tool result's text content.
export function textOf(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// startHTTP serves bin on 127.0.0.1:0 with env and resolves to
// { base, stop }: base is the server's http://host:port, stop ends it
// (SIGTERM, at most 10 s).
export async function startHTTP(bin, env) {
  const server = spawn(bin, ['serve', '--http', '127.0.0.1:0'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server did not start: ' + log)), 15000);
    server.stderr.on('data', (chunk) => {
      log += chunk;
      const m = log.match(/url=(http:\/\/\S+)\/mcp/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    server.on('exit', (code) => reject(new Error(`server exited ${code}: ${log}`)));
  });
  async function stop() {
    if (server.exitCode !== null) return;
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.kill('SIGTERM');
    let timer;
    await Promise.race([exited, new Promise((resolve) => { timer = setTimeout(resolve, 10000); })]);
    clearTimeout(timer);
  }
  return { base, stop };
}
