// preact + htm (vendored, static/vendor/VENDORED.md): `html` tagged templates build preact elements, no build step.

import { h, render } from "./vendor/preact.module.js";
import htm from "./vendor/htm.module.js";

export { render };
export { useCallback, useEffect, useMemo, useRef, useState } from "./vendor/hooks.module.js";
export const html = htm.bind(h);
