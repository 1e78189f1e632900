// The responses room: the OpenAI Responses API over our agents, and the
// Agents API's follow of a conversation as Server-Sent Events.
export { errorBody as openAIErrorBody } from "./openai.ts";
export { isResponsesPath, responsesRouteDocs, responsesRoutes } from "./routes.ts";
