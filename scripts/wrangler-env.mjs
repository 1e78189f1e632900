// The environment every local `wrangler dev` of this project runs with (npm
// start, and the Node tests, bench and fault harnesses through them).
//
// wrangler 4.86 prepares to pull the Machine container's image (a registry
// image, wrangler.jsonc) even in local dev, where no container is started
// (dev.enable_containers is false): it wants an account id and an API token,
// and without them asks to log in. Nothing local uses either, so placeholders
// serve; a real one set in the environment wins.
// Every such Node process loads loopback-keep-alive.mjs first (why: there).
const KEEP_ALIVE = `--import=${new URL("./loopback-keep-alive.mjs", import.meta.url).href}`;

const PLACEHOLDERS = { CLOUDFLARE_ACCOUNT_ID: "0".repeat(32), CLOUDFLARE_API_TOKEN: "local-dev-no-cloudflare-token" };

export function localWranglerEnv(env = process.env) {
  const loggedIn = env.CLOUDFLARE_API_TOKEN || env.CLOUDFLARE_ACCOUNT_ID;
  const nodeOptions = env.NODE_OPTIONS?.includes(KEEP_ALIVE) ? env.NODE_OPTIONS : [env.NODE_OPTIONS, KEEP_ALIVE].filter(Boolean).join(" ");
  return { ...env, NODE_OPTIONS: nodeOptions, WRANGLER_SEND_METRICS: "false", ...(loggedIn ? {} : PLACEHOLDERS) };
}
