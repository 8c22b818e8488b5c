// The official TypeScript SDK's (v1) OAuth client against bub-mcp's
// authorization-server front, driven by TestServeOAuthProxyTSClient:
// discovery from the 401, registration, PKCE, the code exchange, a call,
// and a refresh after the server refused a spoilt access token.
// argv: endpoint URL, redirect URI. $SDK is the SDK's dist/esm directory.
// Protocol on stdout: "AUTHORIZE <url>", then the test writes the code on
// stdin; "RESULT <text>", "REFRESHED <bool>", "DONE".
import { createInterface } from 'node:readline';

const sdk = process.env.SDK;
const { Client } = await import(`${sdk}/client/index.js`);
const { StreamableHTTPClientTransport } = await import(`${sdk}/client/streamableHttp.js`);
const { UnauthorizedError } = await import(`${sdk}/client/auth.js`);

const [endpoint, redirect] = process.argv.slice(2);
const store = {};
const provider = {
  get redirectUrl() { return redirect; },
  get clientMetadata() {
    return { client_name: 'ts-sdk test', redirect_uris: [redirect], grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'], token_endpoint_auth_method: 'none' };
  },
  state() { return 'ts-sdk-state'; },
  clientInformation() { return store.client; },
  saveClientInformation(c) { store.client = c; },
  tokens() { return store.tokens; },
  saveTokens(t) { store.tokens = t; },
  redirectToAuthorization(u) { console.log(`AUTHORIZE ${u}`); },
  saveCodeVerifier(v) { store.verifier = v; },
  codeVerifier() { return store.verifier; },
};

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

async function connect() {
  const client = new Client({ name: 'ts-sdk test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(endpoint), { authProvider: provider }));
  return client;
}

async function read(client) {
  const res = await client.callTool({ name: 'fs_read', arguments: { path: 'note.txt' } });
  if (res.isError) throw new Error(`fs_read: ${JSON.stringify(res.content)}`);
  return res.content[0].text;
}

let client;
try {
  client = await connect();
  throw new Error('connected without authorization');
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
}
const transport = new StreamableHTTPClientTransport(new URL(endpoint), { authProvider: provider });
const { value: code } = await lines.next();
await transport.finishAuth(code.trim());
client = await connect();
console.log(`RESULT ${JSON.stringify(await read(client))}`);
await client.close();

// A spoilt access token: the server answers 401 and the SDK refreshes.
const before = store.tokens.refresh_token;
store.tokens = { ...store.tokens, access_token: 'spoilt' };
client = await connect();
await read(client);
console.log(`REFRESHED ${store.tokens.refresh_token !== before && store.tokens.access_token !== 'spoilt'}`);
await client.close();
console.log('DONE');
process.exit(0);
