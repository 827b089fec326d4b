// Pick a launcher by name: INTEROP_RELAY=control (the default) | relayd |
// relayd-valkey-3.
import * as control from "./control.mjs";
import * as relayd from "./relayd.mjs";

const LAUNCHERS = {
  control: control.launch,
  relayd: relayd.launch,
  "relayd-valkey-3": relayd.launchValkey3,
};

export function launcherNamed(name) {
  const launch = LAUNCHERS[name];
  if (!launch) throw new Error(`unknown launcher ${name}; one of ${Object.keys(LAUNCHERS).join(", ")}`);
  return launch;
}
