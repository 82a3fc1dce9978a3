/** This library's version (package.json's; a test keeps them equal): sent in the User-Agent. */
export const VERSION = '0.2.0';
