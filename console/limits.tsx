// A tenant's own daily spend limit as a form, for a tenant admin or the
// platform (the same setting as PUT /v1/tenants/{t}/limits).
import type { TenantBounds } from "../runtime/index.ts";
import { PostForm } from "./layout.tsx";

export function LimitSection(props: { tenant: string; own: { dailyUsd: number | null; exempt: boolean } | null; bounds: TenantBounds; action: string; token: string }) {
  const now = props.own?.dailyUsd ?? null;
  return (
    <section id="limit">
      <h3>Daily spend limit</h3>
      <p class="bounds muted">
        {props.bounds.maxDailyUsd === null ? "The platform sets no ceiling for it." : `The platform caps it at ${props.bounds.maxDailyUsd} USD for this tenant's admins.`}{" "}
        {props.bounds.models === null ? "Every model the deployment knows may be chosen." : `Models this tenant's admins may choose: ${props.bounds.models.join(", ") || "none"}.`}
      </p>
      <PostForm action={props.action} token={props.token}>
        <label>
          USD a day (empty: none of its own) <input name="dailyUsd" inputmode="decimal" value={now === null ? "" : String(now)} />
        </label>
        <button>Set the limit</button>
      </PostForm>
    </section>
  );
}

/** The platform's bounds for the tenant's admins, as a form for the platform (the same setting as PUT /v1/tenants/{t}/bounds). */
export function BoundsSection(props: { bounds: TenantBounds; action: string; token: string }) {
  return (
    <section id="bounds">
      <h3>The platform's bounds for this tenant's admins</h3>
      <PostForm action={props.action} token={props.token}>
        <label>
          Highest daily limit they may set, USD (empty: no ceiling) <input name="maxDailyUsd" inputmode="decimal" value={props.bounds.maxDailyUsd === null ? "" : String(props.bounds.maxDailyUsd)} />
        </label>
        <label>
          Models they may choose, separated by spaces (empty: every model) <input type="text" name="models" value={(props.bounds.models ?? []).join(" ")} />
        </label>
        <button>Set the bounds</button>
      </PostForm>
    </section>
  );
}
