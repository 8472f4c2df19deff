// Polling a loader while a page is shown: `usePoll(load, ms)` runs `load` now, then `ms` after each end (never two
// at once), and stops when the page goes; a refused answer's Retry-After is not read: the next poll comes anyway.

import { useEffect, useRef, useState } from "./html.js";

export function usePoll(load, ms, deps = []) {
  const [state, setState] = useState({ value: null, error: null, loaded: false });
  const live = useRef(true);
  useEffect(() => {
    live.current = true;
    let timer = null;
    const tick = async () => {
      try {
        const value = await load();
        if (live.current) setState({ value, error: null, loaded: true });
      } catch (err) {
        if (live.current) setState((s) => ({ ...s, error: err, loaded: true }));
      }
      if (live.current) timer = setTimeout(tick, ms);
    };
    tick();
    return () => {
      live.current = false;
      clearTimeout(timer);
    };
  }, deps);
  return state;
}
