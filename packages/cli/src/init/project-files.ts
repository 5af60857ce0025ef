// The files `sluice init <dir>` writes: a project that depends on the published Sluice packages and
// runs as it is — a generated stream, a TypeScript computation behind a throttler, and a README with
// the two commands (install, run). Kept as plain strings so what a user gets is readable here.

export interface ProjectTemplateOptions {
  /** npm package name of the new project. */
  readonly name: string;
  /** Version range of the Sluice packages, e.g. "^0.1.0": the version of this CLI. */
  readonly sluiceRange: string;
}

export function projectFiles(options: ProjectTemplateOptions): Record<string, string> {
  const { name, sluiceRange } = options;
  return {
    "package.json": json({
      name,
      version: "0.1.0",
      private: true,
      type: "module",
      scripts: {
        start: "sluice run pipeline.json --drain",
        validate: "sluice validate pipeline.json",
        typecheck: "tsc --noEmit",
      },
      dependencies: { "@sluice/cli": sluiceRange, "@sluice/runtime": sluiceRange },
      devDependencies: { "@types/node": "20.19.8", typescript: "5.9.3" },
    }),
    "tsconfig.json": json({
      compilerOptions: {
        target: "ES2023",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        noEmit: true,
        allowImportingTsExtensions: true,
        verbatimModuleSyntax: true,
        skipLibCheck: true,
        types: ["node"],
      },
      include: ["src"],
    }),
    "pipeline.json": json({
      pipeline: name,
      streams: {
        orders: { topic: "orders", format: "json", partitions: 2, generator: { module: "./src/generate-orders.ts", messages: 300 } },
        invoices: { topic: "invoices", format: "json", partitions: 2 },
      },
      computations: {
        Invoicer: { module: "./src/invoicer.ts", inputs: ["orders"], outputs: ["invoices"], max_rows_per_batch: 10 },
      },
      dynamic_spec: {
        throttlers: { orders_per_second: { limit: 100, period: "1s", request_period: "200ms" } },
        computations: { Invoicer: { input_rows_throttler_id: "orders_per_second" } },
      },
    }),
    "src/generate-orders.ts": `// Fills the \`orders\` stream when the pipeline runs in one process (\`sluice run\`): message \`index\`.
export default (index: number) => ({ key: \`order-\${index}\`, value: { orderId: index, amountCents: 100 + (index % 50) * 10 } });
`,
    "src/invoicer.ts": `import { defineComputation } from "@sluice/runtime";

interface Order {
  readonly orderId: number;
  readonly amountCents: number;
}

// Turns orders into invoices. The throttler \`orders_per_second\` (pipeline.json) is applied before
// every batch: the job waits for one unit per order, so invoices leave at 100 per second at most.
export default defineComputation<Order>({
  process(batch, ctx) {
    for (const message of batch.messages) {
      const order = message.value;
      ctx.emit("invoices", { key: message.key, value: { orderId: order.orderId, totalCents: order.amountCents } });
    }
  },
});
`,
    "README.md": `# ${name}

A Sluice pipeline: orders → \`Invoicer\` → invoices, throttled to 100 orders per second by the
throttler \`orders_per_second\` in \`pipeline.json\` (the first 100 pass at once: a bucket starts full).

\`\`\`bash
npm install
npm start        # = npx sluice run pipeline.json --drain: 300 orders in about 2 s, then a summary
\`\`\`

\`npx sluice validate pipeline.json\` checks the spec and its modules; \`npm run typecheck\` type-checks
\`src/\`. Change the limit in \`pipeline.json\` and run again to see the rate follow it.
`,
  };
}

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}
