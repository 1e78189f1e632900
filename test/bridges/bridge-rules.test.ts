// The rules every bridge shares: one replay window for signed requests, and
// one way to fit text to a platform's limit. Each bridge's own tests show it
// refuses a request 301 s old (Slack events, Discord interactions, webhook);
// Telegram signs nothing with a time (its webhook carries a secret token);
// Google Chat's bearer JWT carries its own expiry (test/bridges/gchat), as
// Teams' activities' tokens do (bridges/teams/verify.ts).
import { describe, expect, it } from "vitest";
import { freshTimestamp, MAX_SKEW_SECONDS } from "../../bridges/shared/timestamp.ts";
import { clip, splitText } from "../../lib/text.ts";
import { discordOutbound } from "../../bridges/discord/outbound.ts";
import { gchatOutbound } from "../../bridges/gchat/outbound.ts";
import { slackOutbound } from "../../bridges/slack/outbound.ts";
import { teamsOutbound } from "../../bridges/teams/outbound.ts";
import { telegramOutbound } from "../../bridges/telegram/outbound.ts";
import { webhookOutbound } from "../../bridges/webhook/outbound.ts";

describe("the replay window", () => {
  const now = 1_700_000_000_000;
  const at = (seconds: number) => String(now / 1000 + seconds);

  it("takes whole Unix seconds up to MAX_SKEW_SECONDS away, either way", () => {
    expect(MAX_SKEW_SECONDS).toBe(300);
    for (const offset of [0, -300, 300]) expect(freshTimestamp("X-Ts", at(offset), now)).toBe(at(offset));
  });

  it("refuses older, later, malformed or missing timestamps with a 401 naming the header", () => {
    for (const value of [at(-301), at(301), `${at(0)}.5`, "-1", "", undefined, "1e9"]) {
      expect(() => freshTimestamp("X-Ts", value, now)).toThrow(expect.objectContaining({ status: 401, message: expect.stringContaining("X-Ts") }));
    }
  });
});

describe("fitting text to a limit", () => {
  it("clips with an ellipsis, never splitting a surrogate pair", () => {
    expect(clip("short", 10)).toBe("short");
    expect(clip("abcdefghij", 5)).toBe("abcd…");
    const clipped = clip("😀".repeat(10), 6);
    expect(clipped.length).toBeLessThanOrEqual(6);
    expect(clipped).toBe("😀😀…");
  });

  it("splits at line breaks, then spaces, then hard, keeping every character", () => {
    expect(splitText("aaaaaa\nbbb ccccc", 10)).toEqual(["aaaaaa", "bbb ccccc"]);
    expect(splitText("aaaaaaaa bbbb", 10)).toEqual(["aaaaaaaa", "bbbb"]);
    expect(splitText("abcdefghijkl", 5)).toEqual(["abcde", "fghij", "kl"]);
    const emoji = splitText("😀".repeat(7), 5);
    expect(emoji.join("")).toBe("😀".repeat(7));
    expect(emoji.every((p) => p.length <= 5 && !/^[\udc00-\udfff]/.test(p))).toBe(true);
  });

  it("each bridge splits replies at its own limit", () => {
    const long = "word ".repeat(20_000);
    const limits: [string[], number][] = [
      [discordOutbound.split(long), 2000],
      [telegramOutbound.split(long), 4096],
      [gchatOutbound.split(long), 4096],
      [teamsOutbound.split(long), 8000],
      [webhookOutbound.split(long), 32_000],
    ];
    for (const [parts, limit] of limits) {
      expect(parts.length).toBeGreaterThan(1);
      expect(parts.every((p) => p.length <= limit)).toBe(true);
      expect(parts.join(" ")).toBe(long);
    }
    // Slack's limit applies to the rendered mrkdwn (its own tests cover the escaping).
    expect(slackOutbound.split(long).every((p) => p.length <= 4000)).toBe(true);
  });
});
