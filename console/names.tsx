// People shown by name: a page marks each person it shows with <Person>, and
// one look-up (a call to each team's or guild's tenant object, runtime/control)
// replaces each identity with the name it goes by, the identity on hover. An
// identity with no name known stays as it is; text that is already a name
// (what a chat payload carried) is shown as it is.
import { identitySchema, peopleNames } from "../runtime/index.ts";

export function Person(props: { who: string }) {
  return identitySchema.safeParse(props.who).success ? <span class="person" title={props.who}>{props.who}</span> : <>{props.who}</>;
}

/** A <Person> as rendered, not yet named (identities are letters, digits, _ - and colons: nothing to escape). */
const UNNAMED = /<span class="person" title="((?:slack|discord):[A-Za-z0-9_-]{1,64}:[A-Za-z0-9_-]{1,64})">\1<\/span>/g;

/** The rendered page with each person the directory knows named. */
export async function withNames(env: Env, html: string): Promise<string> {
  const names = await peopleNames(env, [...html.matchAll(UNNAMED)].map((m) => m[1]!));
  return html.replace(UNNAMED, (unnamed, identity: string) => {
    const name = names[identity];
    return name ? String(<span class="person" title={identity}>{name}</span>) : unnamed;
  });
}
