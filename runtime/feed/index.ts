// The feed room: a conversation's events in order with durable ids (what a
// follower reads, "events after N"), the followers it tells as they are
// written, and the Responses API's calls the object keeps.
export { feedAfter, type FeedEvent, feedRows, type FeedPage } from "./feed.ts";
export { type FunctionTool, type ResponseEvents, type ResponseRefusal, type ResponseRequest, responseMessage, Responses, type ResponseState, type ResponseStatus } from "./responses.ts";
export { FEED_AND_RESPONSES_TABLES, RESPONSES_BY_TURN } from "./schema.ts";
export { FOLLOW_GONE, followAsk, Followers, followRequest, tellFollowersAfterEachCall } from "./followers.ts";
