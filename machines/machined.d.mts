// machined.mjs as the Worker imports it: its source text (wrangler.jsonc's
// Text rule), handed to a container as its entrypoint. Node runs the file itself.
declare const source: string;
export default source;
