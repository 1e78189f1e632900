// A fake of Discord's OAuth2 (authorization code grant) on loopback, written
// from Discord's public docs (topics/oauth2) and as strict as Discord:
// GET /oauth2/authorize takes response_type=code, the application's client_id,
// scopes, an absolute redirect_uri and (PKCE) a code_challenge with
// code_challenge_method=S256, and sends the browser back to redirect_uri with
// a one-time code and the state it was given. POST /api/oauth2/token (a form,
// client_id and client_secret in the body or as Basic auth) exchanges that code
// once, with the same redirect_uri and the code_verifier of the challenge, for
// a Bearer access token: a wrong client is a 401 invalid_client, an unknown or
// reused code, another redirect_uri or verifier a 400 invalid_grant.
// GET /api/users/@me and /api/users/@me/guilds need that token (401 without);
// the guilds need the `guilds` scope (403 Missing Access). Who signs in is set
// by the test beforehand:
//   PUT /_control/user {id, username, global_name?, guilds: [{id, name}]}
import { createHash, randomBytes } from "node:crypto";
import { DISCORD_APPLICATION_ID } from "./discord.mjs";
import { listen, readBody, sendJson } from "./http.mjs";

export const FAKE_DISCORD_CLIENT_SECRET = "test-discord-client-secret";

const invalidGrant = (what) => ({ error: "invalid_grant", error_description: `Invalid "${what}" in request.` });
const UNAUTHORIZED = { message: "401: Unauthorized", code: 0 };

/** The client's id and secret: HTTP Basic, else the form's fields (Discord takes either). */
function clientOf(req, form) {
  const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? "")?.[1];
  if (!basic) return { id: form.get("client_id"), secret: form.get("client_secret") };
  const [id, secret] = Buffer.from(basic, "base64").toString("utf8").split(":");
  return { id, secret };
}

export async function startDiscordOAuth() {
  let person = null;
  const codes = new Map(); // code → {person, redirectUri, challenge, scopes}
  const tokens = new Map(); // access token → {person, scopes}
  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const raw = req.method === "POST" || req.method === "PUT" ? await readBody(req) : "";
    if (url.pathname === "/_control/user" && req.method === "PUT") {
      person = JSON.parse(raw);
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/oauth2/authorize" && req.method === "GET") {
      const q = url.searchParams;
      const scopes = (q.get("scope") ?? "").split(" ");
      const problem =
        q.get("response_type") !== "code" ? "response_type must be code"
        : q.get("client_id") !== DISCORD_APPLICATION_ID ? "Unknown application"
        : !scopes.includes("identify") ? "scope must include identify"
        : !URL.canParse(q.get("redirect_uri") ?? "") ? "Invalid OAuth2 redirect_uri"
        : q.has("code_challenge") && q.get("code_challenge_method") !== "S256" ? "code_challenge_method must be S256"
        : person === null ? "no one is signed in to Discord (PUT /_control/user)"
        : null;
      if (problem) return sendJson(res, 400, { message: problem, code: 50035 });
      const code = randomBytes(15).toString("base64url");
      codes.set(code, { person, redirectUri: q.get("redirect_uri"), challenge: q.get("code_challenge"), scopes });
      const back = new URL(q.get("redirect_uri"));
      back.searchParams.set("code", code);
      if (q.has("state")) back.searchParams.set("state", q.get("state"));
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }
    if (url.pathname === "/api/oauth2/token" && req.method === "POST") {
      if (!(req.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded")) return sendJson(res, 400, { message: "Invalid Form Body", code: 50035 });
      const form = new URLSearchParams(raw);
      const client = clientOf(req, form);
      if (client.id !== DISCORD_APPLICATION_ID || client.secret !== FAKE_DISCORD_CLIENT_SECRET) return sendJson(res, 401, { error: "invalid_client" });
      if (form.get("grant_type") !== "authorization_code") return sendJson(res, 400, { error: "unsupported_grant_type" });
      const grant = codes.get(form.get("code") ?? "");
      if (!grant) return sendJson(res, 400, invalidGrant("code"));
      codes.delete(form.get("code"));
      if (form.get("redirect_uri") !== grant.redirectUri) return sendJson(res, 400, invalidGrant("redirect_uri"));
      if (grant.challenge !== null && createHash("sha256").update(form.get("code_verifier") ?? "").digest("base64url") !== grant.challenge) return sendJson(res, 400, invalidGrant("code_verifier"));
      const token = randomBytes(15).toString("base64url");
      tokens.set(token, { person: grant.person, scopes: grant.scopes });
      return sendJson(res, 200, { access_token: token, token_type: "Bearer", expires_in: 604800, refresh_token: randomBytes(15).toString("base64url"), scope: grant.scopes.join(" ") });
    }
    if ((url.pathname === "/api/users/@me" || url.pathname === "/api/users/@me/guilds") && req.method === "GET") {
      const held = tokens.get(/^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? "");
      if (!held) return sendJson(res, 401, UNAUTHORIZED);
      const { id, username, global_name = null, guilds = [] } = held.person;
      if (url.pathname === "/api/users/@me") return sendJson(res, 200, { id, username, global_name, discriminator: "0", avatar: null });
      if (!held.scopes.includes("guilds")) return sendJson(res, 403, { message: "Missing Access", code: 50001 });
      return sendJson(res, 200, guilds.map((g) => ({ id: g.id, name: g.name, icon: null, owner: false, permissions: "0", features: [] })));
    }
    return sendJson(res, 404, { message: "404: Not Found", code: 0 });
  });
}
