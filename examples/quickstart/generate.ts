// Fills the `numbers` stream in embedded mode: message `index` of the run.
export default (index: number) => ({ key: String(index), value: { n: index } });
