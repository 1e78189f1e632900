// Signing a person in to the console through the fake "Sign in with Slack"
// (test/fakes/slack-oidc.mjs), as a browser follows it: what the console tests,
// the tenancy test and the upgrade fixture's maker share.
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { worker } from "../support.ts";

const E = env as unknown as Record<string, string>;

/** Signs `user` of `team` in under `name`; returns the session cookie. */
export async function signInAs(team: string, user: string, name: string): Promise<{ cookie: string }> {
  await fetch(`${E.SLACK_SIGN_IN_BASE_URL}/_control/user`, { method: "PUT", body: JSON.stringify({ team, user, name }) });
  const start = await worker("/console/login/slack", { redirect: "manual" });
  expect(start.status).toBe(303);
  const signin = start.headers.get("set-cookie")!.split(";")[0]!;
  const atSlack = await fetch(start.headers.get("location")!, { redirect: "manual" });
  expect(atSlack.status).toBe(302);
  const back = new URL(atSlack.headers.get("location")!);
  const done = await worker(`${back.pathname}${back.search}`, { headers: { cookie: signin } });
  expect(done.status, await done.clone().text()).toBe(200);
  const session = done.headers.getSetCookie().find((c) => c.startsWith("antiproton_console="))!;
  return { cookie: session.split(";")[0]! };
}
