import type { AlignmentGroupSnapshot } from "../quota/alignment/alignment-groups.ts";
import type { PrometheusText } from "@sluice/status-http";

/** Watermark alignment groups (docs/design.md §12), one series per group; the families are written even with no group. */
export function writeAlignmentMetrics(out: PrometheusText, groups: readonly AlignmentGroupSnapshot[]): void {
  const per = (value: (g: AlignmentGroupSnapshot) => number | null) =>
    groups.flatMap((g) => {
      const v = value(g);
      return v === null ? [] : [{ labels: { alignment_group: g.group }, value: v }];
    });
  out
    .gauge(
      "sluice_controller_alignment_group_watermark_ms",
      "Watermark of the alignment group: the minimum read watermark (event time, epoch ms) over its assigned, non-idle partitions; absent while none is live or one has read nothing yet.",
      per((g) => g.watermarkMs),
    )
    .gauge(
      "sluice_controller_alignment_partitions",
      "Partitions of the alignment group that workers report now (assigned).",
      per((g) => g.partitions),
    )
    .gauge(
      "sluice_controller_alignment_held_partitions",
      "Partitions of the alignment group paused because they are more than drift_bound ahead of the rest.",
      per((g) => g.held),
    )
    .gauge(
      "sluice_controller_alignment_idle_partitions",
      "Partitions of the alignment group with nothing to read for idle_timeout; they do not hold the group back.",
      per((g) => g.idle),
    );
}
