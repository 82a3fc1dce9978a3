export async function importCommand(_args: string[]): Promise<number> {
  console.error('not yet implemented');
  return 1;
}
