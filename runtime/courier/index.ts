// The courier room: the small objects that do the waiting the agent's object
// must never do (one lane per kind of effect per conversation), the pace of
// each chat rate limit they share, and the queue consumer that hands them
// their effects; and the text their model calls are writing, for whoever listens.
export { consumeQueue, Courier, courierStub } from "./courier.ts";
export { partialText, type PartialText } from "./partial-texts.ts";
export { SendPace } from "./pace.ts";
