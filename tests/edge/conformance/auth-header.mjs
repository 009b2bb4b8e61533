// Preloaded into the conformance runner (node --import): adds our bearer token to every HTTP
// request it makes, through undici's global dispatcher (used by fetch and by undici.request).
// The official suite has no option for client credentials, and our edge refuses anonymous calls.
import { Agent, setGlobalDispatcher } from "undici";

const token = process.env.ECHO_CONFORMANCE_TOKEN;
if (!token) {
  throw new Error("ECHO_CONFORMANCE_TOKEN is not set");
}
const value = `Bearer ${token}`;

function withAuth(headers) {
  if (headers == null) return { authorization: value };
  if (Array.isArray(headers)) {
    if (headers.length > 0 && Array.isArray(headers[0])) return [...headers, ["authorization", value]];
    return [...headers, "authorization", value];
  }
  if (typeof headers[Symbol.iterator] === "function") return [...headers, ["authorization", value]];
  return { ...headers, authorization: value };
}

class AuthAgent extends Agent {
  dispatch(options, handler) {
    return super.dispatch({ ...options, headers: withAuth(options.headers) }, handler);
  }
}

setGlobalDispatcher(new AuthAgent());
