export type * from "./quota-service.ts";
