// A real browser (Debian chromium, driven by playwright-core) through the
// sign-in at the IdP and bub-mcp's consent page, for
// TestServeOAuthProxyBrowser. argv: the authorization URL, the client's
// redirect URI. $PLAYWRIGHT is playwright-core's directory. Prints
// "TITLE <consent page title>", "CONSOLE <message>" for every console
// error (CSP violations land there), then "REDIRECT <url>" with the URL
// the browser was sent back to.
const { chromium } = await import(`${process.env.PLAYWRIGHT}/index.mjs`);
const [authURL, redirect] = process.argv.slice(2);

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
});
try {
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.log(`CONSOLE ${m.text()}`); });
  let back;
  const arrived = new Promise((resolve) => {
    page.route((u) => u.href.startsWith(redirect), (route) => {
      back = route.request().url();
      route.fulfill({ status: 200, contentType: 'text/plain', body: 'back at the client' });
      resolve();
    });
  });
  await page.goto(authURL);
  await page.getByRole('button', { name: 'Allow' }).waitFor();
  console.log(`TITLE ${await page.title()}`);
  await page.getByRole('button', { name: 'Allow' }).click();
  // Not a timed assertion: a bound, so a blocked redirect fails the test
  // instead of hanging it.
  let timer;
  const stuck = new Promise((resolve) => { timer = setTimeout(resolve, 30000, 'stuck'); });
  if (await Promise.race([arrived, stuck]) === 'stuck') {
    console.log(`STUCK ${page.url()}`);
    process.exitCode = 1;
  } else {
    console.log(`REDIRECT ${back}`);
  }
  clearTimeout(timer);
} finally {
  await browser.close();
}
