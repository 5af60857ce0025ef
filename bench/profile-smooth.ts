// Profiling aid (not part of `pnpm bench`): one run of group 7's setup (bench/groups/smooth.ts) per
// subject, optionally with every process under `node --cpu-prof`, printing the run's figures.
//   node --import tsx bench/profile-smooth.ts [--window MS] [--prof DIR] [sluice smooth|sluice plain ...]
import { measure, type Subject } from "./groups/smooth.ts";

const args = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const at = args.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const [value] = args.splice(at, 2).slice(1);
  return value ?? fallback;
};
const windowMs = Number(option("window", "5000"));
const profDir = option("prof", "");
const subjects = (args.length > 0 ? args : ["sluice smooth", "sluice plain"]) as Subject[];

for (const subject of subjects) {
  const dir = `${profDir}/${subject.replace(/\s+/g, "-")}`;
  const figures = await measure(null, subject, windowMs, 1_000, (role) => (profDir ? ["--cpu-prof", `--cpu-prof-dir=${dir}/${role}`] : []));
  console.log(`${subject}: ${JSON.stringify(figures)}`);
}
