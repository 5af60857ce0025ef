export async function main(argv: readonly string[]): Promise<number> {
  console.log("sluice", argv.join(" "));
  return 0;
}
