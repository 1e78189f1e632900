// The store room's configuration: how long a settled conversation stays in
// its object (RETENTION_DAYS) and how many pictures one model request carries
// (MODEL_IMAGES_MAX, MODEL_IMAGES_MAX_BYTES), parsed here. A bad value is
// reported by its name.
import * as z from "zod";
import { parseJsonVar } from "../../lib/config.ts";

/** A settled conversation untouched this long is archived to R2 (RETENTION_DAYS, default 90). */
export function retentionMs(env: Env): number {
  const days = parseJsonVar("RETENTION_DAYS", env.RETENTION_DAYS, z.number().positive().max(36_500), "90");
  return days * 86_400_000;
}

export interface ImageLimits {
  /** The newest this many images of a conversation reach the model. */
  count: number;
  /** …and of them, no more bytes than this (before base64). */
  bytes: number;
}

export function imageLimits(env: Env): ImageLimits {
  return {
    count: parseJsonVar("MODEL_IMAGES_MAX", env.MODEL_IMAGES_MAX, z.number().int().min(1).max(100), "8"),
    bytes: parseJsonVar("MODEL_IMAGES_MAX_BYTES", env.MODEL_IMAGES_MAX_BYTES, z.number().int().min(1024).max(32 * 1024 * 1024), String(8 * 1024 * 1024)),
  };
}
