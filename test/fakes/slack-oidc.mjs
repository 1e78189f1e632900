// A fake of "Sign in with Slack" (OpenID Connect) on loopback, as strict as
// Slack's: GET /openid/connect/authorize takes response_type=code, a scope with
// openid, the app's client_id, a state and a nonce and an absolute redirect_uri,
// and sends the browser back to redirect_uri with a one-time code and the same
// state; POST /api/openid.connect.token (form) exchanges that code once, for
// the same client (id and secret) and the same redirect_uri, for an id_token
// whose claims carry the nonce, the team and the user. Who signs in is set by
// the test beforehand:
//   PUT /_control/user   {team, user, name}: the person the next authorizations sign in
import { createHmac, randomBytes } from "node:crypto";
import { listen, readBody, sendJson } from "./http.mjs";
import { FAKE_SLACK_CLIENT_ID, FAKE_SLACK_CLIENT_SECRET } from "./slack.mjs";

const b64url = (value) => Buffer.from(typeof value === "string" ? value : JSON.stringify(value)).toString("base64url");

/** An HS256 JWT, keyed with the client secret (OpenID Connect's symmetric signing). */
function idToken(claims) {
  const head = `${b64url({ alg: "HS256", typ: "JWT" })}.${b64url(claims)}`;
  return `${head}.${createHmac("sha256", FAKE_SLACK_CLIENT_SECRET).update(head).digest("base64url")}`;
}

export async function startSlackOidc() {
  let person = null;
  const codes = new Map(); // code → {person, nonce, redirectUri, clientId}
  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const raw = req.method === "POST" || req.method === "PUT" ? await readBody(req) : "";
    if (url.pathname === "/_control/user" && req.method === "PUT") {
      person = JSON.parse(raw);
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/openid/connect/authorize" && req.method === "GET") {
      const q = url.searchParams;
      const problem =
        q.get("response_type") !== "code" ? "response_type must be code"
        : !(q.get("scope") ?? "").split(/[ ,]/).includes("openid") ? "scope must include openid"
        : q.get("client_id") !== FAKE_SLACK_CLIENT_ID ? "invalid_client_id"
        : !q.get("state") ? "state is required"
        : !q.get("nonce") ? "nonce is required"
        : !URL.canParse(q.get("redirect_uri") ?? "") ? "bad_redirect_uri"
        : person === null ? "no one is signed in to Slack (PUT /_control/user)"
        : null;
      if (problem) return sendJson(res, 400, { ok: false, error: problem });
      const code = randomBytes(16).toString("hex");
      codes.set(code, { person, nonce: q.get("nonce"), redirectUri: q.get("redirect_uri"), clientId: q.get("client_id") });
      const back = new URL(q.get("redirect_uri"));
      back.searchParams.set("code", code);
      back.searchParams.set("state", q.get("state"));
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }
    if (url.pathname === "/api/openid.connect.token" && req.method === "POST") {
      if (!(req.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded")) return sendJson(res, 200, { ok: false, error: "invalid_form_data" });
      const form = new URLSearchParams(raw);
      if (form.get("client_id") !== FAKE_SLACK_CLIENT_ID || form.get("client_secret") !== FAKE_SLACK_CLIENT_SECRET) return sendJson(res, 200, { ok: false, error: "invalid_client_id" });
      const grant = codes.get(form.get("code") ?? "");
      if (!grant) return sendJson(res, 200, { ok: false, error: "invalid_code" });
      codes.delete(form.get("code"));
      if (form.get("redirect_uri") !== grant.redirectUri) return sendJson(res, 200, { ok: false, error: "bad_redirect_uri" });
      const now = Math.floor(Date.now() / 1000);
      const { team, user, name } = grant.person;
      return sendJson(res, 200, {
        ok: true,
        access_token: `xoxp-${randomBytes(8).toString("hex")}`,
        token_type: "Bearer",
        id_token: idToken({
          iss: "https://slack.com",
          sub: user,
          aud: grant.clientId,
          exp: now + 3600,
          iat: now,
          auth_time: now,
          nonce: grant.nonce,
          name,
          "https://slack.com/user_id": user,
          "https://slack.com/team_id": team,
        }),
      });
    }
    return sendJson(res, 404, { ok: false, error: "unknown_method" });
  });
}
