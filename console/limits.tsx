// A tenant's own daily spend limit as a form, for a tenant admin or the
// platform (the same setting as PUT /v1/tenants/{t}/limits).
import { PostForm } from "./layout.tsx";

export function LimitSection(props: { tenant: string; own: { dailyUsd: number | null; exempt: boolean } | null; action: string; token: string }) {
  const now = props.own?.dailyUsd ?? null;
  return (
    <section id="limit">
      <h3>Daily spend limit</h3>
      <PostForm action={props.action} token={props.token}>
        <label>
          USD a day (empty: none of its own) <input name="dailyUsd" inputmode="decimal" value={now === null ? "" : String(now)} />
        </label>
        <button>Set the limit</button>
      </PostForm>
    </section>
  );
}
