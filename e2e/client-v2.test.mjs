// The v2 TypeScript MCP client (@modelcontextprotocol/client) against the
// real bub-mcp binary: over stdio and streamable HTTP, each in both protocol
// eras — the 2025-11-25 initialize handshake (HTTP: a session) and the
// sessionless 2026-07-28 wire (server/discover, per-request _meta). Run by
// run.sh with BUB_MCP_BIN set.
import { test, before, after, describe } from 'node:test';
import { startHTTP, textOf } from './harness.mjs';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const bin = process.env.BUB_MCP_BIN;
assert.ok(bin, 'BUB_MCP_BIN must point at a built bub-mcp');

const root = mkdtempSync(join(tmpdir(), 'bub-e2e-v2-'));
const workspace = join(root, 'ws');
const home = join(root, 'home');
const configPath = join(root, 'bub.toml');
mkdirSync(workspace);
writeFileSync(configPath, `
[profiles.default]
workspace = ${JSON.stringify(workspace)}

[profiles.ro]
workspace = ${JSON.stringify(workspace)}
tools = ["fs.read"]

[profiles.coder]
workspace = ${JSON.stringify(workspace)}
code_mode = true
session = "e2e-v2-coder"
`);
const env = { ...process.env, BUB_HOME: home, BUB_CONFIG: configPath };

const eras = {
  // The 2025 sequence: initialize, then (HTTP) an Mcp-Session-Id.
  '2025-11-25': { mode: 'legacy', era: 'legacy' },
  // No initialize, no session: server/discover, then _meta on every request.
  '2026-07-28': { mode: { pin: '2026-07-28' }, era: 'modern' },
};

let http; // { base, stop }

function transportFor(kind, profile) {
  if (kind === 'stdio') {
    return new StdioClientTransport({ command: bin, args: ['serve', '--profile', profile], env, stderr: 'pipe' });
  }
  const path = profile === 'default' ? '/mcp' : `/mcp/p/${profile}`;
  return new StreamableHTTPClientTransport(new URL(http.base + path));
}

async function connect(kind, version, profile = 'default') {
  const { mode, era } = eras[version];
  const client = new Client({ name: 'bub-e2e-v2', version: '1.0.0' }, { versionNegotiation: { mode } });
  const transport = transportFor(kind, profile);
  await client.connect(transport);
  assert.equal(client.getProtocolEra(), era);
  assert.equal(client.getNegotiatedProtocolVersion(), version);
  return { client, transport };
}

before(async () => { http = await startHTTP(bin, env); });
after(async () => {
  await http?.stop();
  rmSync(root, { recursive: true, force: true });
});

for (const kind of ['stdio', 'http']) {
  for (const version of Object.keys(eras)) {
    describe(`v2 client over ${kind}, protocol ${version}`, () => {
      test('connects in the right era and lists the builtin tools', async () => {
        const { client, transport } = await connect(kind, version);
        try {
          assert.equal(client.getServerVersion()?.name, 'bub-mcp');
          if (kind === 'http') {
            // Sessions belong to the 2025 era only.
            if (version === '2025-11-25') assert.match(transport.sessionId ?? '', /\S/);
            else assert.equal(transport.sessionId, undefined);
          }
          const { tools } = await client.listTools();
          const names = tools.map((t) => t.name);
          for (const want of ['bash', 'fs_read', 'fs_write', 'fs_edit', 'tape_info']) {
            assert.ok(names.includes(want), `${want} missing from ${names}`);
          }
          assert.ok(!names.includes('run_code'), 'run_code listed without code mode');
          const fsRead = tools.find((t) => t.name === 'fs_read');
          assert.equal(fsRead.inputSchema.type, 'object');
          assert.equal(fsRead.annotations.readOnlyHint, true);
        } finally { await client.close(); }
      });

      test('fs_write then fs_read round-trips a file', async () => {
        const { client } = await connect(kind, version);
        try {
          const file = `v2-${kind}-${version}.txt`;
          const content = `hello from the v2 client over ${kind} at ${version}\nsecond line`;
          const wrote = await client.callTool({ name: 'fs_write', arguments: { path: file, content } });
          assert.ok(!wrote.isError, textOf(wrote));
          assert.match(textOf(wrote), /^wrote: /);
          assert.equal(readFileSync(join(workspace, file), 'utf8'), content);
          const read = await client.callTool({ name: 'fs_read', arguments: { path: file } });
          assert.ok(!read.isError, textOf(read));
          assert.equal(textOf(read), content);
        } finally { await client.close(); }
      });

      test('a tool error is an isError result, not a protocol error', async () => {
        const { client } = await connect(kind, version);
        try {
          const res = await client.callTool({ name: 'fs_read', arguments: { path: 'does-not-exist.txt' } });
          assert.equal(res.isError, true);
          assert.match(textOf(res), /^\[not_found\] /);
          const bad = await client.callTool({ name: 'fs_read', arguments: { path: 7 } });
          assert.equal(bad.isError, true);
          assert.match(textOf(bad), /argument validation failed/);
        } finally { await client.close(); }
      });

      test('a hidden tool is refused', async () => {
        const { client } = await connect(kind, version, 'ro');
        try {
          const { tools } = await client.listTools();
          assert.deepEqual(tools.map((t) => t.name), ['fs_read']);
          await assert.rejects(client.callTool({ name: 'fs_write', arguments: { path: 'v2-hidden', content: 'x' } }), /not found/i);
          assert.equal(existsSync(join(workspace, 'v2-hidden')), false);
        } finally { await client.close(); }
      });

      test('code mode: run_code calls a non-preserved tool', async () => {
        const { client } = await connect(kind, version, 'coder');
        try {
          const { tools } = await client.listTools();
          assert.ok(tools.some((t) => t.name === 'run_code'), 'run_code not offered');
          const code = 'info = await tools.tape_info()\nprint("entries" in info or "name" in info)';
          const res = await client.callTool({ name: 'run_code', arguments: { code } });
          assert.ok(!res.isError, textOf(res));
          assert.equal(textOf(res).trim(), 'True');
        } finally { await client.close(); }
      });
    });
  }
}
