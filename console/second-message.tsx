// The agent page's setting for a person's second message while the agent is
// still answering (runtime/turns/second-message.ts): what is in effect, and a
// form to set it for this agent or leave it to the tenant's.
import { SECOND_MESSAGE_STRATEGIES, type SecondMessage } from "../runtime/index.ts";
import { PostForm } from "./layout.tsx";

export interface SecondMessageSetting {
  effective: SecondMessage;
  default: SecondMessage;
  tenant: SecondMessage | null;
  agent: SecondMessage | null;
}

/** "Leave it to the tenant" in the form: the agent's own choice is removed. */
export const INHERIT = "inherit";

export const STRATEGY_WORDS: Record<SecondMessage, string> = {
  steer: "steer: the agent reads it before its next step",
  queue: "queue: it is answered after the current answer",
  interrupt: "interrupt: the current answer stops and a new one answers everything said",
  reject: "reject: the person is asked to send it again once the answer is done",
};

export function SecondMessageSection(props: { setting: SecondMessageSetting; action: string; token: string }) {
  const { setting } = props;
  const source = setting.agent ? "set for this agent" : setting.tenant ? "set for its tenant" : "the default";
  return (
    <section class="second-message">
      <h3>A second message while the agent works</h3>
      <p>{`Now: ${STRATEGY_WORDS[setting.effective]} (${source}).`}</p>
      <PostForm action={props.action} token={props.token}>
        <label>
          For this agent{" "}
          <select name="strategy">
            <option value={INHERIT} selected={setting.agent === null}>{`as its tenant (${setting.tenant ?? setting.default})`}</option>
            {SECOND_MESSAGE_STRATEGIES.map((strategy) => (
              <option value={strategy} selected={setting.agent === strategy}>{STRATEGY_WORDS[strategy]}</option>
            ))}
          </select>
        </label>
        <button>Save</button>
      </PostForm>
    </section>
  );
}
