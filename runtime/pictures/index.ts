// The pictures room: images stored once per agent in R2 and referred to from
// the transcript, and read back into a model request within its window.
export { imageLimits, type ImageLimits } from "./config.ts";
export { isStoredImage, storeImage, type StoredImage } from "./store.ts";
export { leftOut, picturesIn } from "./window.ts";
