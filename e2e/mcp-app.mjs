// The official TypeScript client reads an MCP App (SEP-1865,
// io.modelcontextprotocol/ui) through bub-mcp as a host does: it finds a
// tool whose _meta.ui.resourceUri names a ui:// resource, reads that
// resource by the URI as listed, and prints what it got as JSON. Run by
// upstream's TestMCPAppThroughBub with MCP_APP_SERVER set to the server's
// {command, args, env}.
//
// The host side is the official MCP Apps package's: getToolUiResourceUri
// reads the tool's _meta as hosts do (and refuses a URI that is not
// ui://), and the UI must come back as its RESOURCE_MIME_TYPE.
import { getToolUiResourceUri, RESOURCE_MIME_TYPE } from '@modelcontextprotocol/ext-apps/app-bridge';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const spec = JSON.parse(process.env.MCP_APP_SERVER ?? 'null');
if (!spec) throw new Error('MCP_APP_SERVER must hold the server\'s {command, args, env}');

const client = new Client({ name: 'mcp-app-host', version: '1.0.0' });
await client.connect(new StdioClientTransport({ command: spec.command, args: spec.args, env: spec.env, stderr: 'inherit' }));

// The upstream's tools appear once it is up; a minute bounds a wedged start.
let tool;
for (const end = Date.now() + 60_000; !tool && Date.now() < end;) {
  const { tools } = await client.listTools();
  tool = tools.find((t) => getToolUiResourceUri(t) !== undefined);
  if (!tool) await new Promise((r) => setTimeout(r, 50));
}
if (!tool) throw new Error('no tool with _meta.ui.resourceUri was listed');
const uri = getToolUiResourceUri(tool);
const { contents } = await client.readResource({ uri });
if (contents[0]?.mimeType !== RESOURCE_MIME_TYPE) {
  throw new Error(`the UI came back as ${contents[0]?.mimeType}, not ${RESOURCE_MIME_TYPE}`);
}
console.log(JSON.stringify({ tool: tool.name, uri, contents }));
await client.close();
