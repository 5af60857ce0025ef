import * as z from "zod";
import { WATERMARK_ALIGNMENT_DEFAULTS } from "./defaults.ts";
import { duration } from "./duration.ts";
import { mustBe } from "./rule-error.ts";

// `computations.<name>.watermark_alignment` (docs/design.md §12; YT Flow's TWatermarkAlignmentSpec, Flink's
// withWatermarkAlignment): the partitions of every computation naming one group read in step in
// event time. A partition whose read watermark is more than `drift_bound` ahead of the slowest live
// partition of its group is paused at the source and asks for no quota until the group catches up.

export const watermarkAlignmentSpecSchema = z
  .strictObject(
    {
      group_name: z
        .string({ error: mustBe("a non-empty group name") })
        .min(1, { error: mustBe("a non-empty group name") })
        .prefault(WATERMARK_ALIGNMENT_DEFAULTS.group_name)
        .describe(`Partitions of all computations naming the same group are aligned with each other. Default "${WATERMARK_ALIGNMENT_DEFAULTS.group_name}".`),
      drift_bound: duration()
        .prefault(WATERMARK_ALIGNMENT_DEFAULTS.drift_bound)
        .describe(
          "How far (event time) a partition's read watermark may run ahead of its group's watermark (the minimum over the group's " +
            `assigned, non-idle partitions) before it is paused. Default "${WATERMARK_ALIGNMENT_DEFAULTS.drift_bound}" (as in YT Flow).`,
        ),
      idle_timeout: duration({ minMs: 0, exclusive: true })
        .prefault(WATERMARK_ALIGNMENT_DEFAULTS.idle_timeout)
        .describe(
          "A partition that had nothing to read for this long (nothing fetched, nothing being processed, and not paused by " +
            "alignment) is idle: it stops holding its group back until data arrives again. A partition that was assigned and " +
            `has not read anything yet holds the group back for at most this long. Default "${WATERMARK_ALIGNMENT_DEFAULTS.idle_timeout}".`,
        ),
    },
    { error: mustBe("an object") },
  )
  .describe("Watermark alignment of this computation's input partitions with the other members of its group (docs/design.md §12).");

export type WatermarkAlignmentSpec = z.output<typeof watermarkAlignmentSpecSchema>;
export type WatermarkAlignmentSpecInput = z.input<typeof watermarkAlignmentSpecSchema>;
