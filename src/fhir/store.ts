import type { Database } from '../db/database';

export class FhirStore {
  constructor(readonly db: Database) {}
}
