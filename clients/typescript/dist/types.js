// Generated from the OpenAPI document Pont publishes (GET /api/openapi.json) by scripts/generate-types.ts.
// Do not edit: run `npm run clients:types` in the repository root.
export {};
