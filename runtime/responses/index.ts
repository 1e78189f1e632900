// The responses room: the OpenAI Responses API over our agents, and the
// Agents API's follow of a conversation as Server-Sent Events.
export { responsesRouteDocs, responsesRoutes } from "./routes.ts";
