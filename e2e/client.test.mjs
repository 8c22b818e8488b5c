// The official TypeScript MCP client against the real bub-mcp binary, over
// stdio and streamable HTTP. Run by run.sh with BUB_MCP_BIN set.
import { test, before, after, describe } from 'node:test';
import { startHTTP, textOf } from './harness.mjs';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const bin = process.env.BUB_MCP_BIN;
assert.ok(bin, 'BUB_MCP_BIN must point at a built bub-mcp');

const root = mkdtempSync(join(tmpdir(), 'bub-e2e-'));
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

[profiles.agentic]
workspace = ${JSON.stringify(workspace)}
agent = true
session = "e2e-agent"

[profiles.coder]
workspace = ${JSON.stringify(workspace)}
code_mode = true
session = "e2e-coder"
`);
const env = { ...process.env, BUB_HOME: home, BUB_CONFIG: configPath };

async function stdioClient(profile) {
  const transport = new StdioClientTransport({
    command: bin, args: ['serve', '--profile', profile], env, stderr: 'pipe',
  });
  const client = new Client({ name: 'bub-e2e', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

let http; // { base, stop }

async function httpClient(profile) {
  const path = profile === 'default' ? '/mcp' : `/mcp/p/${profile}`;
  const client = new Client({ name: 'bub-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(http.base + path)));
  return client;
}

before(async () => { http = await startHTTP(bin, env); });
after(async () => {
  await http?.stop();
  rmSync(root, { recursive: true, force: true });
});

for (const [name, connect] of [['stdio', stdioClient], ['http', httpClient]]) {
  describe(`bub-mcp over ${name}`, () => {
    test('lists the builtin tools with model names', async () => {
      const client = await connect('default');
      try {
        const { tools } = await client.listTools();
        const names = tools.map((t) => t.name);
        for (const want of ['bash', 'bash_output', 'bash_kill', 'fs_read', 'fs_write', 'fs_edit', 'spill_read', 'tape_info', 'web_fetch']) {
          assert.ok(names.includes(want), `${want} missing from ${names}`);
        }
        assert.ok(!names.includes('run_code'), 'run_code listed without code mode');
        const fsRead = tools.find((t) => t.name === 'fs_read');
        assert.equal(fsRead.inputSchema.type, 'object');
        assert.equal(fsRead.annotations.readOnlyHint, true);
        // Preserved tools answer in text only; structured tools declare their output.
        assert.equal(fsRead.outputSchema, undefined);
        assert.equal(tools.find((t) => t.name === 'tape_info').outputSchema.type, 'object');
      } finally { await client.close(); }
    });

    test('fs_write then fs_read round-trips a file', async () => {
      const client = await connect('default');
      try {
        const file = `hello-${name}.txt`;
        const content = `hello from the TypeScript client over ${name}\nsecond line`;
        const wrote = await client.callTool({ name: 'fs_write', arguments: { path: file, content } });
        assert.equal(wrote.isError, undefined);
        assert.match(textOf(wrote), /^wrote: /);
        assert.equal(readFileSync(join(workspace, file), 'utf8'), content);
        const read = await client.callTool({ name: 'fs_read', arguments: { path: file } });
        assert.equal(textOf(read), content);
      } finally { await client.close(); }
    });

    test('a tool error is an isError result', async () => {
      const client = await connect('default');
      try {
        const res = await client.callTool({ name: 'fs_read', arguments: { path: 'does-not-exist.txt' } });
        assert.equal(res.isError, true);
        assert.match(textOf(res), /^\[\w+\] /);
        const bad = await client.callTool({ name: 'fs_read', arguments: { path: 7 } });
        assert.equal(bad.isError, true);
        assert.match(textOf(bad), /argument validation failed/);
      } finally { await client.close(); }
    });

    test('a hidden tool is refused, whatever its name', async () => {
      const client = await connect('ro');
      try {
        const { tools } = await client.listTools();
        assert.deepEqual(tools.map((t) => t.name), ['fs_read']);
        for (const hidden of ['fs_write', 'fs.write', 'bash']) {
          await assert.rejects(client.callTool({ name: hidden, arguments: { path: 'x', content: 'y', command: 'true' } }), /not found/i);
        }
        assert.equal(existsSync(join(workspace, 'x')), false);
      } finally { await client.close(); }
    });
  });
}

for (const [name, connect] of [['stdio', stdioClient], ['http', httpClient]]) {
  describe(`code mode over ${name}`, () => {
    test('a code_mode profile lists only preserved tools and run_code', async () => {
      const client = await connect('coder');
      try {
        const { tools } = await client.listTools();
        assert.deepEqual(tools.map((t) => t.name).sort(),
          ['bash', 'bash_input', 'bash_kill', 'bash_output', 'fs_edit', 'fs_glob', 'fs_grep', 'fs_read', 'fs_write', 'run_code', 'spill_read']);
        const runCode = tools.find((t) => t.name === 'run_code');
        assert.match(runCode.description, /<code_mode>/);
        assert.match(client.getInstructions() ?? '', /tools-[0-9a-f]{12}\.pyi/);
      } finally { await client.close(); }
    });

    test('run_code calls non-preserved tools and gathers them', async () => {
      const client = await connect('coder');
      try {
        const code = [
          'import asyncio',
          'info = await tools.tape_info()',
          'print("entries" in info or "name" in info)',
          'results = await asyncio.gather(*[tools.tape_anchors() for _ in range(5)])',
          'print(len(results))',
          'try:',
          '    await tools.no_such_tool()',
          'except Exception as e:',
          '    print("raised:", e)',
        ].join('\n');
        const res = await client.callTool({ name: 'run_code', arguments: { code } });
        assert.equal(res.isError, undefined, textOf(res));
        const lines = textOf(res).trim().split('\n');
        assert.equal(lines[0], 'True');
        assert.equal(lines[1], '5');
        assert.match(lines[2], /^raised: .*no_such_tool/);
        // Non-preserved tools are not callable directly in code mode.
        await assert.rejects(client.callTool({ name: 'tape_info', arguments: {} }), /not found/i);
      } finally { await client.close(); }
    });

    test('the stub resource reads back', async () => {
      const client = await connect('coder');
      try {
        const { contents } = await client.readResource({ uri: 'bub://codemode/stub' });
        assert.match(contents[0].text, /async def tape_info\(/);
        assert.doesNotMatch(contents[0].text, /async def fs_read\(/);
      } finally { await client.close(); }
    });
  });
}

// A scripted OpenAI-compatible model: the first request gets a streamed
// fs_write tool call, the next one (which carries the tool result) a
// streamed final answer.
async function fakeModel() {
  const requests = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const payload = JSON.parse(body);
      requests.push(payload);
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      const chunk = (delta, finish = null) => res.write('data: ' + JSON.stringify({
        id: 'c1', object: 'chat.completion.chunk', created: 0, model: payload.model,
        choices: [{ index: 0, delta, finish_reason: finish }],
      }) + '\n\n');
      const sawTool = payload.messages.some((m) => m.role === 'tool');
      if (!sawTool) {
        chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'fs_write', arguments: '' } }] });
        chunk({ tool_calls: [{ index: 0, function: { arguments: JSON.stringify({ path: 'agent.txt', content: 'written by agent_run' }) } }] });
        chunk({}, 'tool_calls');
      } else {
        chunk({ role: 'assistant', content: 'I wrote ' });
        chunk({ content: 'agent.txt.' });
        chunk({}, 'stop');
      }
      res.write('data: ' + JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: payload.model, choices: [],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } }) + '\n\n');
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, requests, base: `http://127.0.0.1:${server.address().port}/v1` };
}

describe('agent_run through the TypeScript client', () => {
  test('runs a whole turn against a fake model and returns its answer', async () => {
    const model = await fakeModel();
    const transport = new StdioClientTransport({
      command: bin, args: ['serve', '--profile', 'agentic'], stderr: 'pipe',
      env: { ...env, BUB_MODEL: 'openai:fake-model', BUB_API_BASE: model.base, BUB_API_KEY: 'test-key' },
    });
    const client = new Client({ name: 'bub-e2e', version: '1.0.0' });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      assert.ok(tools.some((t) => t.name === 'agent_run'), 'agent_run not offered');
      const res = await client.callTool({ name: 'agent_run', arguments: { prompt: 'write agent.txt' } });
      assert.equal(res.isError, undefined, textOf(res));
      assert.match(textOf(res), /I wrote agent\.txt\./);
      assert.equal(readFileSync(join(workspace, 'agent.txt'), 'utf8'), 'written by agent_run');
      assert.equal(model.requests.length, 2);
      assert.ok(model.requests[0].tools.some((t) => t.function.name === 'fs_write'));
    } finally {
      await client.close();
      model.server.close();
    }
  });

  test('agent_run is not offered to a profile without agent = true', async () => {
    const client = await stdioClient('default');
    try {
      const { tools } = await client.listTools();
      assert.ok(!tools.some((t) => t.name === 'agent_run'));
    } finally { await client.close(); }
  });
});
