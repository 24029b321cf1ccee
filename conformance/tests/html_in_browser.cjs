// Opens an HTML report in a real browser (Debian's Chromium, driven by
// playwright-core) and checks what a person would: the page loads from the
// file alone, shows the verdict and the failing requirement, and logs no
// console error, page error or failed request.
//   NODE_PATH=scripts/node/node_modules node html_in_browser.cjs REPORT.html VERDICT REQUIREMENT
const { chromium } = require('playwright-core');

async function main() {
  const [file, verdict, requirement] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const problems = [];
  try {
    const page = await browser.newPage();
    page.on('console', (message) => { if (message.type() === 'error') problems.push(`console: ${message.text()}`); });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('requestfailed', (request) => problems.push(`request failed: ${request.url()}`));
    page.on('request', (request) => {
      if (!request.url().startsWith('file://')) problems.push(`fetched ${request.url()}: the page is not self-contained`);
    });
    await page.goto(`file://${file}`, { waitUntil: 'load' });
    const shown = (await page.textContent('#verdict')) ?? '';
    if (!shown.includes(`Verdict: ${verdict}`)) problems.push(`the verdict shown is '${shown}', expected ${verdict}`);
    const headings = await page.$$eval('h3.failing-requirement', (nodes) => nodes.map((node) => node.textContent));
    if (!headings.some((text) => text.startsWith(requirement))) problems.push(`${requirement} is not shown: ${headings}`);
    if (!(await page.isVisible('#verdict'))) problems.push('the verdict is not visible');
  } finally {
    await browser.close();
  }
  if (problems.length > 0) {
    console.log(problems.join('\n'));
    process.exit(1);
  }
  console.log('ok');
}

main().catch((error) => {
  console.log(`cannot open the page in Chromium: ${error.message}`);
  process.exit(1);
});
