/* version.h -- the one place the version lives: --version, model files and
 * every JSON summary read it from here. */
#ifndef GMM_VERSION_H
#define GMM_VERSION_H

#define GMM_VERSION "0.1.0"
#define GMM_FORMAT_VERSION 1

#endif
